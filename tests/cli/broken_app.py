"""An application that fails while it is imported."""

raise RuntimeError("the settings file is missing")
