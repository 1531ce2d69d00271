"""realprobe: measure how real public web APIs behave; replay, simulate and score agents on them."""

__version__ = "0.1.0"
PROJECT_URL = "https://github.com/realprobe/realprobe"
USER_AGENT = f"realprobe/{__version__} (+{PROJECT_URL})"


def __getattr__(name: str) -> object:
    """`realprobe.use_cassette`, loaded on first use (importing realprobe stays cheap)."""
    if name == "use_cassette":
        import importlib

        return importlib.import_module("realprobe.replay.session").use_cassette
    raise AttributeError(f"module 'realprobe' has no attribute {name!r}")
