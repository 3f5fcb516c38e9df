"""Manager-based runtime (MBA), mjlab / Isaac Lab style, in NumPy."""
