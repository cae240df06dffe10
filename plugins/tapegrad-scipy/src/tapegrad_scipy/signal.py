"""stub"""

def register(registry):
    pass
