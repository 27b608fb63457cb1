"""Building blocks: cells, recurrent stacks, attention, transformer blocks. Shapes in comments."""
