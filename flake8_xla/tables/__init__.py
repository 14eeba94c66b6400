"""The table-driven rule machinery: a rule table's typed rows (``core``), their uses in a file
(``uses``), the rule base that reports the uses (``rules``) and the fix builders' common parts
(``fixes``). Two tables sit on it: ``lifecycle/`` (XLA101-XLA106, XLA903) and ``migration/`` (XLA5xx)."""
