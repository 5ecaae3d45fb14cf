"""Python function -> IR: gast conversion of control flow (convert/), run-time operators
(operators.py), and later the tracing values, guards and the per-call dynamic path."""
