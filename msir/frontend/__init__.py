"""The Python frontend: Python source (AST) to the msir dialect."""
