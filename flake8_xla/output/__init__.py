"""Report formats: how findings are rendered (``formats``) and how text reaches a terminal
(``terminal``: names on one line, colour, writes that never crash on an ASCII stream)."""
