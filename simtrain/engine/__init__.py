"""simtrain.engine layer (see DESIGN.md)."""
