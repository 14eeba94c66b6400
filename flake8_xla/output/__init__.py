"""Report formats: the CLI's (``formats``) and flake8's ``--format`` plugins (``flake8_formats``)."""
