"""realprobe: measure how real public web APIs behave; replay, simulate and score agents on them."""

__version__ = "0.1.0"
PROJECT_URL = "https://github.com/realprobe/realprobe"
USER_AGENT = f"realprobe/{__version__} (+{PROJECT_URL})"
