"""The error every CLI module raises for a usage mistake: one line on stderr, exit status 2."""


class UsageError(Exception):
    pass
