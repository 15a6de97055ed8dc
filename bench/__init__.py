"""The benchmark: ``python bench/run.py`` runs it; the modules beside it hold its parts."""
