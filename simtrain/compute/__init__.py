"""simtrain.compute layer (see DESIGN.md)."""
