"""Loss curve plots for the writeup (matplotlib is imported lazily so that the
rest of the code does not need it)."""

from pathlib import Path


def smooth(values: list[float], alpha: float = 0.9) -> list[float]:
    """Exponential moving average, like the wandb smoothing slider."""
    out = []
    running = None
    for v in values:
        running = v if running is None else alpha * running + (1 - alpha) * v
        out.append(running)
    return out


def plot_loss_curves(
    steps: list[int],
    train_losses: list[float],
    val_steps: list[int] | None = None,
    val_losses: list[float] | None = None,
    out_path: str | Path = "loss.png",
    title: str = "TinyStories",
) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(steps, smooth(train_losses), label="train (smoothed)")
    if val_steps and val_losses:
        ax.plot(val_steps, val_losses, "o-", label="validation")
    ax.set_xlabel("step")
    ax.set_ylabel("loss")
    ax.set_title(title)
    ax.legend()
    fig.tight_layout()
    fig.savefig(out_path)
    plt.close(fig)
