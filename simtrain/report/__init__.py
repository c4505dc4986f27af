"""simtrain.report layer (see DESIGN.md)."""
