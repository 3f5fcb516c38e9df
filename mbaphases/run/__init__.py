"""The formal run, in three homes: the design (which units of work a batch has: solo runs or pairs,
and how they are paired), the executors (where units run: slots of CPUs, and the runs they hand
back), the batch record (plan, attempts, how it ended: what resume, estimates and reports read).
``batch`` puts them together; ``prepare`` is what a batch needs first (sides, asv, environments)."""
