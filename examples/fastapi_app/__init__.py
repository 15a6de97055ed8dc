"""A FastAPI shop that schedules in its request transaction; see ``app.py``."""
