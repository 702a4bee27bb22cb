/* commands.h: the entry points of the simstore subcommands, one file each
 * (cmd/cmd_<name>.c). Each takes argv with argv[0] = the command's name and
 * returns the process exit code (0 success, 1 failure, 2 usage). */
#ifndef SIMS_CMD_COMMANDS_H
#define SIMS_CMD_COMMANDS_H

/* `simstore --version`: versions and the text segmenter in use. */
int simstore_cli_version(void);

int cmd_fingerprint(int argc, char **argv);
int cmd_distance(int argc, char **argv);
int cmd_pairs(int argc, char **argv);
int cmd_clusters(int argc, char **argv);
int cmd_build(int argc, char **argv);
int cmd_query(int argc, char **argv);
int cmd_stats(int argc, char **argv);
int cmd_add(int argc, char **argv);
int cmd_delete(int argc, char **argv);
int cmd_compact(int argc, char **argv);
int cmd_inspect(int argc, char **argv);
int cmd_verify(int argc, char **argv);
int cmd_dump(int argc, char **argv);
int cmd_dedup(int argc, char **argv);
int cmd_get(int argc, char **argv);
int cmd_export(int argc, char **argv);
/* server/serve.c: the HTTP server. */
int cmd_serve(int argc, char **argv);

#endif
