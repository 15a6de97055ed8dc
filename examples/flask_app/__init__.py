"""A Flask shop with a sync session and a background scheduler; see ``app.py``."""
