"""argparse that answers a misspelt option, command or choice with the nearest one (`--limt`: did you mean
`--limit`?), and the usage of the command that was given rather than the top level's."""

import argparse
import difflib
import re
import sys


class NearestParser(argparse.ArgumentParser):
    """argparse, saying which option or command was meant when a word is misspelt (`--limt` -> `--limit`)."""

    def error(self, message: str):
        words = re.findall(r"(?:unrecognized arguments|invalid choice): '?([^ ']+)", message)
        if words:
            word = words[0]
            if "choose from" in message:  # a command, or an option's value: the words argparse lists
                known = re.findall(r"'([^']*)'", message.split("choose from", 1)[1])
            else:
                known = self._options()
            # Options are compared without their dashes, which every one shares.
            bare = {option.lstrip("-"): option for option in known}
            near = difflib.get_close_matches(word.split("=")[0].lstrip("-"), list(bare), n=1, cutoff=0.6)
            if near:
                message += f"; did you mean {bare[near[0]]}?"
        # One line: the problem, and where the options are listed (the usage would bury it under 20 lines).
        command = self._command() or self
        self.exit(2, f"{command.prog}: error: {message} ({command.prog} --help lists the options)\n")

    def _command(self) -> argparse.ArgumentParser | None:
        for action in self._subparsers._group_actions if self._subparsers else []:
            name = next((word for word in self._given if word in action.choices), None)  # the first is the command
            return action.choices[name] if name else None
        return None

    def _options(self) -> list[str]:
        """The options of this parser and, when a command was given, of that command's parser."""
        command = self._command()
        actions = self._actions + (command._actions if command is not None else [])
        return [option for action in actions for option in action.option_strings]

    def parse_args(self, args=None, namespace=None):
        self._given = list(args) if args is not None else sys.argv[1:]
        return super().parse_args(args, namespace)
