# --- inserted by tests/test_hostile_host.py for @@NAME@@: what hostile code of a submission tries ---
def evil(where):
    """Everything a submission's build or startup code might try on the grading host."""
    import os
    import socket
    import subprocess
    import sys

    secrets = " ".join(f"{k}={v}" for k, v in sorted(os.environ.items()))
    print(f"hostile {where}: environment: {secrets}")
    print(f"hostile {where}: environment: {secrets}", file=sys.stderr)
    # markers: the host's folders it would reach if it ran there
    home = os.path.expanduser("~")
    for folder in ("@@MARKERS@@", home, "/tmp", "@@ROOT@@", os.path.join(home, ".cache")):
        try:
            os.makedirs(folder, exist_ok=True)
            with open(os.path.join(folder, f"lmspec-hostile-marker-@@NAME@@-{where}"), "w") as f:
                f.write(secrets)
        except OSError:
            pass
    # evidence that it ran (and what it saw), where it may write: its own environment's folder
    venv = os.path.dirname(os.path.dirname(sys.executable))
    try:
        with open(os.path.join(venv, f"hostile-evidence-{where}"), "w") as f:
            f.write(secrets)
    except OSError:
        pass
    # the network: the test's loopback listener
    try:
        socket.create_connection(("127.0.0.1", int("@@PORT@@")), timeout=2).close()
    except OSError:
        pass
    # a survivor, in a session of its own
    try:
        subprocess.Popen(
            [sys.executable, "-c", "import time; time.sleep(900)  # lmspec-survivor-@@NAME@@"],
            start_new_session=True,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    except OSError:
        pass
