"""`python -m seqlower` runs the command line."""

from seqlower.cli import main

main()
