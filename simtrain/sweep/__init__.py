"""simtrain.sweep layer (see DESIGN.md)."""
