// Minimal FUSE low-level filesystem: one file "f" whose writes are acknowledged at once
// (data dropped). Measures the floor cost of one FUSE write request on this machine.
#define FUSE_USE_VERSION 34
#include <fuse_lowlevel.h>
#include <string.h>
#include <errno.h>
#include <stdlib.h>
#include <stdio.h>
static off_t fsize = 0;
static void st_of(fuse_ino_t ino, struct stat *st) {
  memset(st, 0, sizeof *st); st->st_ino = ino;
  if (ino == 1) { st->st_mode = S_IFDIR | 0755; st->st_nlink = 2; }
  else { st->st_mode = S_IFREG | 0644; st->st_nlink = 1; st->st_size = fsize; }
}
static void n_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
  struct stat st; st_of(ino, &st); fuse_reply_attr(req, &st, 1.0);
}
static void n_lookup(fuse_req_t req, fuse_ino_t parent, const char *name) {
  if (parent != 1 || strcmp(name, "f")) { fuse_reply_err(req, ENOENT); return; }
  struct fuse_entry_param e; memset(&e, 0, sizeof e); e.ino = 2; e.attr_timeout = 1; e.entry_timeout = 1;
  st_of(2, &e.attr); fuse_reply_entry(req, &e);
}
static void n_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
  if (fi->flags & O_TRUNC) fsize = 0;
  fuse_reply_open(req, fi);
}
static void n_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off, struct fuse_file_info *fi) {
  if (off + (off_t)size > fsize) fsize = off + size;
  fuse_reply_write(req, size);
}
static void n_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set, struct fuse_file_info *fi) {
  if (to_set & FUSE_SET_ATTR_SIZE) fsize = attr->st_size;
  struct stat st; st_of(ino, &st); fuse_reply_attr(req, &st, 1.0);
}
static void n_fsync(fuse_req_t req, fuse_ino_t ino, int ds, struct fuse_file_info *fi) { fuse_reply_err(req, 0); }
static void n_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) { fuse_reply_err(req, 0); }
static const struct fuse_lowlevel_ops ops = {
  .lookup = n_lookup, .getattr = n_getattr, .open = n_open, .write = n_write,
  .setattr = n_setattr, .fsync = n_fsync, .flush = n_flush,
};
int main(int argc, char *argv[]) {
  struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
  struct fuse_cmdline_opts opts;
  if (fuse_parse_cmdline(&args, &opts) != 0 || !opts.mountpoint) return 1;
  struct fuse_session *se = fuse_session_new(&args, &ops, sizeof ops, NULL);
  if (!se || fuse_session_mount(se, opts.mountpoint) != 0) return 1;
  int r = opts.singlethread ? fuse_session_loop(se) : ({ struct fuse_loop_config *c = fuse_loop_cfg_create(); fuse_session_loop_mt(se, c); });
  fuse_session_unmount(se); fuse_session_destroy(se);
  return r;
}
