// ResourceName: a resource's name ("CPU", "GPU", "memory",
// "accelerator_type:A10G", a cluster's custom ones), interned.
//
// Each distinct name is stored once for the life of the process, as Ray's
// scheduling::ResourceID is: a cluster has few names, and every resource set
// of every node, bundle and gang names them, so a set's entry is a pointer
// and an amount. Two ResourceNames are equal exactly when they name the same
// text, and compare by pointer. Interning is lock-free (an insert-only
// table), so the placement core stays free of locks and threads; a name's
// text never moves. A name stays after no set names it any more: the head
// keeps every name it was ever asked about (tens in a cluster; each a few
// dozen bytes), as Ray's GCS does.
#ifndef BERTH_PLACEMENT_RESOURCE_NAME_H_
#define BERTH_PLACEMENT_RESOURCE_NAME_H_

#include <ostream>
#include <string>

#include "absl/strings/string_view.h"

namespace berth {

class ResourceName {
 public:
  explicit ResourceName(absl::string_view name);

  const std::string& str() const { return *name_; }
  // Reads as its text where a string is asked for.
  operator const std::string&() const { return *name_; }  // NOLINT
  operator absl::string_view() const { return *name_; }   // NOLINT

  friend bool operator==(ResourceName a, ResourceName b) { return a.name_ == b.name_; }
  friend bool operator!=(ResourceName a, ResourceName b) { return a.name_ != b.name_; }
  friend bool operator==(ResourceName a, absl::string_view b) { return *a.name_ == b; }
  friend bool operator!=(ResourceName a, absl::string_view b) { return *a.name_ != b; }
  friend std::ostream& operator<<(std::ostream& out, ResourceName name) {
    return out << *name.name_;
  }

 private:
  const std::string* name_;
};

}  // namespace berth

#endif  // BERTH_PLACEMENT_RESOURCE_NAME_H_
