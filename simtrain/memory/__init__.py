"""simtrain.memory layer (see DESIGN.md)."""
