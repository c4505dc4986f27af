"""simtrain.metrics layer (see DESIGN.md)."""
