"""simtrain.parallel layer (see DESIGN.md)."""
