"""simtrain.topology layer (see DESIGN.md)."""
