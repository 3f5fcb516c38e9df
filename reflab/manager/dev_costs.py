"""The three costs the field measured in its first manager-based runtime, as code.

The demo history (``mbaphases demo-repo``) rewrites this file per commit:
``mba-dev`` has all three, each ``opt/`` commit removes one, ``mba-next`` none.
They are source, not configuration, so no benchmark override can flip them.
Each changes how the work is done, not what it computes (see the parity tests;
the one exception is named on PER_SUBSTEP_DISPATCH).

* PER_SUBSTEP_DISPATCH: on MuJoCo, the action is applied and the physics
  dispatched once per physics substep instead of once per control step (the
  field's first version did this on its MuJoCo path only; MotrixSim keeps one
  dispatch per control step, so its physics does not move). The pool restarts
  the solver's warmstart at every dispatch, so trajectories differ within solver
  tolerance.
* PER_TERM_STATE: in the step path every observation, reward and termination
  term reads the engine state again and derives what it needs (gravity in the
  base frame, foot heights, body positions) for every env, each getter (base
  orientation, base velocities, joints, feet, bodies) with a read of its own,
  and observation groups build per-term temporaries, concatenate them and check
  them for NaN. (Sized so that MBA dev stays well below the 0.90 gate with every
  thread pool at one thread, as in duet runs: with one read per term it cost
  only 9-11% of a step in the MotrixSim cases on a 2-core AMD EPYC VM, at the
  gate; the field measured 19-55% in the seven cases.)
* PER_ENV_RESET: the reset path works env by env in Python: one engine reset
  per env, and per reset env a refresh of every env's state, command metrics
  and observation terms, of which only that env's row is kept; terminal
  observations are saved env by env. Random draws stay batched, so the numbers
  drawn are the same.
"""
PER_SUBSTEP_DISPATCH = False
PER_TERM_STATE = False
PER_ENV_RESET = False
