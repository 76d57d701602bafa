"""Everything below the msir dialect: loops, the llvm dialect, the llvmlite JIT."""
