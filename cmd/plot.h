/* plot.h: charts drawn by gnuplot (Debian gnuplot-nox), run as a child:
 * a script and its data in, a PNG out, published atomically. */
#ifndef SIMSTORE_CMD_PLOT_H
#define SIMSTORE_CMD_PLOT_H

#include <stdio.h>

/* Draw `script` (gnuplot commands, without `set terminal` or `set output`)
 * reading its data from the file `data_path` (the script names it as the
 * variable `data`, a string) into the PNG `png_path`, width x height pixels.
 * The PNG is written beside its final name and renamed into place only when
 * gnuplot succeeded, so a failure leaves no file and never half a chart.
 * Returns 0, or -1 with the reason in msg (gnuplot missing, its error, an
 * I/O error). */
int plot_png(const char *script, const char *data_path, const char *png_path, unsigned width,
             unsigned height, char *msg, size_t msg_size);

/* A temporary data file for plot_png: opened for writing, its name in path
 * (size bytes). Returns the stream or NULL (errno set). */
FILE *plot_data_file(char *path, size_t size);

/* s as a gnuplot string (single quotes, a quote doubled) into out.
 * Returns 0, or -1 when it does not fit. */
int plot_quote(const char *s, char *out, size_t size);

#endif
