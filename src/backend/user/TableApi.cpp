// The handler API of include/morpheus_user.h, as JIT-compiled handlers call
// it: each MU_TABLE global is bound to its user::Table in the JIT
// (Jit.cpp), so the table argument is the Table itself.
#include "backend/user/Table.h"

using morpheus::user::Table;

extern "C" {

void *mu_lookup(struct mu_table_def *table, const void *key) {
  return reinterpret_cast<Table *>(table)->lookup(key);
}

long mu_update(struct mu_table_def *table, const void *key, const void *value) {
  return reinterpret_cast<Table *>(table)->update(key, value) ? 0 : -1;
}

long mu_delete(struct mu_table_def *table, const void *key) {
  return reinterpret_cast<Table *>(table)->remove(key) ? 0 : -1;
}

void mu_prefetch(struct mu_table_def *table, const void *key) {
  reinterpret_cast<const Table *>(table)->prefetch(key);
}

} // extern "C"
