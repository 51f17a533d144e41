"""ConvLab-3 unified datasets (MultiWOZ 2.1, SGD, Taskmaster, CamRest, WOZ, KVRET, CrossWOZ, ...)."""
