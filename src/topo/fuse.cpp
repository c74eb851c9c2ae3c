#include "topo/load_system.h"

#include <functional>

namespace conflux::topo {
namespace {

void fill_attrs(XmlNode& into, const XmlNode& from) {
  for (const auto& [k, v] : from.attrs) into.set_if_missing(k, v);
}

XmlNode* find_pci(XmlNode& n, const std::string& busid) {
  if (n.name == "pci" && normalize_busid(n.attr_or("busid", "")) == busid) return &n;
  for (auto& c : n.children)
    if (XmlNode* hit = find_pci(c, busid)) return hit;
  return nullptr;
}

XmlNode* find_net(XmlNode& n, const std::string& name) {
  if (n.name == "net" && n.attr_or("name", "") == name) return &n;
  for (auto& c : n.children)
    if (XmlNode* hit = find_net(c, name)) return hit;
  return nullptr;
}

XmlNode& cpu_for(XmlNode& root, const std::string& numaid) {
  for (auto& c : root.children)
    if (c.name == "cpu" && c.attr_or("numaid", "") == numaid) return c;
  XmlNode& cpu = root.add("cpu");
  cpu.set("numaid", numaid);
  return cpu;
}

// Merge a discovered <nic> into the file's <pci>: nets the file names
// anywhere keep the file's placement and gain missing attributes.
void merge_nic(XmlNode& root, XmlNode& pci, const XmlNode& nic) {
  for (const auto& net : nic.children) {
    std::string name = net.attr_or("name", "");
    if (XmlNode* known = find_net(root, name)) {
      fill_attrs(*known, net);
      continue;
    }
    XmlNode* target = pci.child("nic");
    if (!target) target = &pci.add("nic");
    target->children.push_back(net);
  }
}

// Discovered <pci> `d` (with its subtree): merge into the file or graft it.
void merge_pci(XmlNode& root, const XmlNode& d, const std::string& parent_busid, const std::string& numaid) {
  std::string busid = normalize_busid(d.attr_or("busid", ""));
  XmlNode* mine = find_pci(root, busid);
  if (!mine) {
    XmlNode* parent = parent_busid.empty() ? nullptr : find_pci(root, parent_busid);
    XmlNode& under = parent ? *parent : cpu_for(root, numaid);
    XmlNode copy = d;
    copy.children.clear();
    under.children.push_back(std::move(copy));
    mine = find_pci(root, busid);
  } else {
    fill_attrs(*mine, d);
  }
  for (const auto& c : d.children) {
    if (c.name == "nic") {
      merge_nic(root, *mine, c);
      mine = find_pci(root, busid);  // merge_nic may have grown a vector above us
    } else if (c.name == "gpu" && !mine->child("gpu")) {
      mine->children.push_back(c);
    } else if (c.name == "pci") {
      merge_pci(root, c, busid, numaid);
      mine = find_pci(root, busid);
    }
  }
}

}  // namespace

XmlNode fuse(XmlNode file, const XmlNode& found) {
  for (const auto& cpu : found.children) {
    if (cpu.name != "cpu") continue;
    std::string numaid = cpu.attr_or("numaid", "0");
    // Only fill an existing CPU's attributes; a CPU the file lacks appears
    // when a device needs it.
    for (auto& c : file.children)
      if (c.name == "cpu" && c.attr_or("numaid", "") == numaid) fill_attrs(c, cpu);
    for (const auto& sub : cpu.children) {
      if (sub.name == "pci") merge_pci(file, sub, "", numaid);
    }
  }
  return file;
}

}  // namespace conflux::topo
