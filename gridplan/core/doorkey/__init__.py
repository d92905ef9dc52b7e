"""MiniGrid's DoorKey as a batched world (``docs/DESIGN.md``, "MiniGrid DoorKey"):
``constants`` (state dims and codes), ``world`` (the settings as data), ``env`` (pure batched
``reset``/``step``), ``observe`` (the egocentric 7x7x3 view and the full grid) and ``values``
(exact V*, Q* and steps to go per layout)."""
