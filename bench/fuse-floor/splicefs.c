// A read-only FUSE passthrough of a directory, as light as a FUSE file system gets: the
// libfuse low-level API, multi-threaded, and file data spliced from the backing file into
// /dev/fuse (no copy through user space). The FUSE floor for concurrent whole-file reads
// (W4): no FUSE mount with its data path in user space reads faster on a machine.
//   splicefs [-s] -o source=DIR MOUNTPOINT
#define FUSE_USE_VERSION 34
#define _GNU_SOURCE
#include <fuse_lowlevel.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct node { int fd; };  // O_PATH fd of the object; the nodeid is the pointer
static struct node root;
static const double TIMEOUT = 1.0;

static int fd_of(fuse_ino_t ino) { return ino == FUSE_ROOT_ID ? root.fd : ((struct node *)ino)->fd; }

static void sf_init(void *u, struct fuse_conn_info *c) {
  c->want |= FUSE_CAP_SPLICE_WRITE | FUSE_CAP_SPLICE_MOVE;
}
static void sf_lookup(fuse_req_t req, fuse_ino_t parent, const char *name) {
  struct fuse_entry_param e; memset(&e, 0, sizeof e);
  int fd = openat(fd_of(parent), name, O_PATH | O_NOFOLLOW);
  if (fd < 0) { fuse_reply_err(req, errno); return; }
  if (fstatat(fd, "", &e.attr, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0) { int r = errno; close(fd); fuse_reply_err(req, r); return; }
  struct node *n = malloc(sizeof *n); n->fd = fd;
  e.ino = (fuse_ino_t)n; e.attr_timeout = TIMEOUT; e.entry_timeout = TIMEOUT;
  fuse_reply_entry(req, &e);
}
static void sf_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup) {
  // One node per lookup reply: the kernel forgets it with the count it was given.
  (void)nlookup;
  if (ino != FUSE_ROOT_ID) { close(((struct node *)ino)->fd); free((void *)ino); }
  fuse_reply_none(req);
}
static void sf_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
  struct stat st;
  if (fstatat(fd_of(ino), "", &st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0) { fuse_reply_err(req, errno); return; }
  fuse_reply_attr(req, &st, TIMEOUT);
}
static void sf_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
  char p[64]; snprintf(p, sizeof p, "/proc/self/fd/%d", fd_of(ino));
  int fd = open(p, O_RDONLY);
  if (fd < 0) { fuse_reply_err(req, errno); return; }
  fi->fh = fd;
  fuse_reply_open(req, fi);
}
static void sf_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi) {
  struct fuse_bufvec b = FUSE_BUFVEC_INIT(size);
  b.buf[0].flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK;
  b.buf[0].fd = fi->fh; b.buf[0].pos = off;
  fuse_reply_data(req, &b, FUSE_BUF_SPLICE_MOVE);
}
static void sf_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
  close(fi->fh); fuse_reply_err(req, 0);
}
static void sf_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
  int fd = openat(fd_of(ino), ".", O_RDONLY | O_DIRECTORY);
  DIR *d = fd < 0 ? NULL : fdopendir(fd);
  if (!d) { fuse_reply_err(req, errno); return; }
  fi->fh = (uint64_t)d;
  fuse_reply_open(req, fi);
}
static void sf_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi) {
  DIR *d = (DIR *)fi->fh; char *buf = malloc(size); size_t used = 0;
  seekdir(d, off);
  for (;;) {
    struct dirent *de = readdir(d);
    if (!de) break;
    struct stat st; memset(&st, 0, sizeof st); st.st_ino = de->d_ino; st.st_mode = de->d_type << 12;
    size_t n = fuse_add_direntry(req, buf + used, size - used, de->d_name, &st, telldir(d));
    if (n > size - used) break;
    used += n;
  }
  fuse_reply_buf(req, buf, used); free(buf);
}
static void sf_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
  closedir((DIR *)fi->fh); fuse_reply_err(req, 0);
}
static const struct fuse_lowlevel_ops ops = {
  .init = sf_init, .lookup = sf_lookup, .forget = sf_forget, .getattr = sf_getattr,
  .open = sf_open, .read = sf_read, .release = sf_release, .opendir = sf_opendir,
  .readdir = sf_readdir, .releasedir = sf_releasedir,
};
struct opts { char *source; };
static const struct fuse_opt optspec[] = { {"source=%s", offsetof(struct opts, source), 0}, FUSE_OPT_END };
int main(int argc, char *argv[]) {
  struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
  struct fuse_cmdline_opts co; struct opts o = {0};
  if (fuse_parse_cmdline(&args, &co) != 0 || !co.mountpoint) return 1;
  if (fuse_opt_parse(&args, &o, optspec, NULL) == -1 || !o.source) { fprintf(stderr, "need -o source=DIR\n"); return 1; }
  root.fd = open(o.source, O_PATH);
  if (root.fd < 0) { perror(o.source); return 1; }
  struct fuse_session *se = fuse_session_new(&args, &ops, sizeof ops, NULL);
  if (!se || fuse_session_mount(se, co.mountpoint) != 0) return 1;
  int r;
  if (co.singlethread) r = fuse_session_loop(se);
  else { struct fuse_loop_config *c = fuse_loop_cfg_create(); r = fuse_session_loop_mt(se, c); fuse_loop_cfg_destroy(c); }
  fuse_session_unmount(se); fuse_session_destroy(se);
  return r;
}
