"""The commands, one module each: ``add_parser`` declares its options, ``main`` runs it and
returns the exit status (0/1 verdicts only; bad input raises UsageError, which the command
line turns into one error line and exit 2)."""
