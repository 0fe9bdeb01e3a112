import importlib.metadata

__version__ = importlib.metadata.version("cs336_basics")


type Shape = tuple[int, ...]  # Python 3.12 syntax, as the 2026 handout allows
