"""The version and the identity realprobe sends (`User-Agent`), importable by any room."""

__version__ = "0.1.0"
PROJECT_URL = "https://github.com/realprobe/realprobe"
USER_AGENT = f"realprobe/{__version__} (+{PROJECT_URL})"
