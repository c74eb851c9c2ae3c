"""The one exception type of the conflux package."""


class Error(RuntimeError):
    """A conflux call failed.

    A RuntimeError, as the failures of torch.distributed's own backends are,
    so code that handles a failed collective the torch way handles conflux's.

    Attributes:
        code: the library's result code (an int equal to a conflux.Result
            value, e.g. Result.TIMEOUT).
        message: what failed, as cfxGetLastError reports it (rank, peer,
            call, sequence number) or the binding's argument check.
    """

    def __init__(self, message, code):
        super().__init__(message, code)
        self.message = message
        self.code = code

    @property
    def code_name(self):
        """The result code's name, e.g. 'INVALID_ARGUMENT'."""
        from . import _conflux
        try:
            return _conflux.Result(self.code).name
        except ValueError:
            return str(self.code)

    def __str__(self):
        return f"[{self.code_name}] {self.message}"
