"""Where a batch's units run. ``local``: this machine's CPUs, in slots of the profile's size."""
