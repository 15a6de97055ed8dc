"""``python -m sqla_scheduler`` runs the command line."""

from sqla_scheduler.cli import main

main()
