"""The world: state layout, tasks as data, the batched environment and exact values.

``constants`` (dims by name, geometry, actions), ``tasks`` (``Task``, frozen, with its registry),
``env`` (pure batched ``reset``/``step``), ``values`` (value iteration V*, Q*, Eq. 1 saliency),
``readings`` (the paper's ambiguous choices as named data), ``protocols`` (evaluation protocols and
reproduction profiles). Paper §3, appendix D.
"""
