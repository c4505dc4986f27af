"""simtrain.reliability layer (see DESIGN.md)."""
