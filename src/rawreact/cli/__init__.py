"""The `rawreact` command: its options (`parser`), the commands that call a model (`run`, with the lines it prints in
`lines`; `compare_command`), those that read files (`files`), and the terminal (progress, Ctrl-C, SIGTERM).
It only wires library functions together; everything it does, a script can call.

May import: every layer.
A new command is a function here and a subparser in `parser`; its work belongs in a layer below.
"""
