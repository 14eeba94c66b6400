"""Facts about one file, computed once and shared by every rule through ``ctx.get(Fact)``:
syntax (nodes by type, scopes), the semantic model (names, imports, release guards), values
(what an expression holds), flow (positions, bindings, wraps), step regions and FSDP facts.
Each module imports only the ones before it in that list."""
