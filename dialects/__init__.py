"""msir dialects: `msir` (functional tensor IR)."""
