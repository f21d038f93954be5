"""`python -m seqlower` runs the command line."""

from seqlower._entry import main

main()
