"""msir-level IR transformations (differentiation, inlining, fusion)."""
