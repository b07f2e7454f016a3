/* cxi_abi.h: the libcxi C ABI the node agent uses, written from the facts
 * in shared/reference/libcxi-abi.md (LP64 only).  Our own definitions of
 * the vendor's layouts; the compile-time checks below pin every size and
 * offset the agent relies on, so a mistake here cannot ship silently.
 * Shared by the agent (src/agent) and the libcxi double (tests/mockcxi).
 */
#ifndef FMB_CXI_ABI_H
#define FMB_CXI_ABI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CXI_SVC_MAX_MEMBERS 2
#define CXI_SVC_MAX_VNIS    4
#define CXI_DEFAULT_SVC_ID  1
#define CXIL_DEVNAME_MAX    13
#define CXIL_DRVNAME_MAX    8
#define CXIL_FRUDESC_MAX    16

enum cxi_rsrc_type {
    CXI_RSRC_TYPE_PTE,
    CXI_RSRC_TYPE_TXQ,
    CXI_RSRC_TYPE_TGQ,
    CXI_RSRC_TYPE_EQ,
    CXI_RSRC_TYPE_CT,
    CXI_RSRC_TYPE_LE,
    CXI_RSRC_TYPE_TLE,
    CXI_RSRC_TYPE_AC,
    CXI_RSRC_TYPE_MAX,
};

enum cxi_traffic_class {
    CXI_TC_DEDICATED_ACCESS,
    CXI_TC_LOW_LATENCY,
    CXI_TC_BULK_DATA,
    CXI_TC_BEST_EFFORT,
    CXI_TC_ETH,
    CXI_TC_MAX,
};

enum cxi_svc_member_type {
    CXI_SVC_MEMBER_IGNORE,
    CXI_SVC_MEMBER_UID,
    CXI_SVC_MEMBER_GID,
    CXI_SVC_MEMBER_NET_NS, /* SHS 14.0 and later */
};

struct cxi_limits {
    uint16_t max;
    uint16_t res;
};

struct cxi_rsrc_limits {
    union {
        struct {
            struct cxi_limits ptes, txqs, tgqs, eqs, cts, les, tles, acs;
        };
        struct cxi_limits type[CXI_RSRC_TYPE_MAX];
    };
};

struct cxi_svc_member {
    union {
        uint32_t uid;
        uint32_t gid;
    } svc_member;
    int32_t type; /* enum cxi_svc_member_type */
};

struct cxi_svc_desc {
    uint8_t restricted_members : 1;
    uint8_t restricted_vnis : 1;
    uint8_t restricted_tcs : 1;
    uint8_t resource_limits : 1;
    uint8_t enable : 1;
    uint8_t is_system_svc : 1;
    uint8_t cntr_pool_id : 2;
    uint8_t num_vld_vnis;
    uint16_t vnis[CXI_SVC_MAX_VNIS];
    bool tcs[CXI_TC_MAX];
    struct cxi_svc_member members[CXI_SVC_MAX_MEMBERS];
    struct cxi_rsrc_limits limits;
    unsigned int svc_id;
};

struct cxi_svc_fail_info {
    uint16_t rsrc_avail[CXI_RSRC_TYPE_MAX];
    bool no_le_pools;
    bool no_tle_pools;
    bool no_cntr_pools;
};

struct cxil_devinfo {
    unsigned int dev_id;
    unsigned int nid;
    unsigned int pid_bits;
    unsigned int pid_count;
    unsigned int pid_granule;
    unsigned int min_free_shift;
    unsigned int rdzv_get_idx;
    char device_name[CXIL_DEVNAME_MAX + 1];
    char driver_name[CXIL_DRVNAME_MAX + 1];
    unsigned int vendor_id;
    unsigned int device_id;
    unsigned int device_rev;
    unsigned int device_proto;
    unsigned int device_platform;
    uint16_t num_ptes;
    uint16_t num_txqs;
    uint16_t num_tgqs;
    uint16_t num_eqs;
    uint16_t num_cts;
    uint16_t num_acs; /* ACs before TLEs and LEs here, unlike the enum */
    uint16_t num_tles;
    uint16_t num_les;
    uint16_t pci_domain;
    uint8_t pci_bus;
    uint8_t pci_device;
    uint8_t pci_function;
    size_t link_mtu;
    size_t link_speed;
    uint8_t link_state;
    int uc_nic;
    unsigned int pct_eq;
    int cassini_version;
    char fru_description[CXIL_FRUDESC_MAX];
    bool is_vf;
    int system_type_identifier;
};

struct cxil_dev {
    struct cxil_devinfo info; /* the only public member */
};

struct cxil_device_list {
    unsigned int count;
    struct cxil_devinfo info[];
};

struct cxil_svc_list {
    unsigned int count;
    struct cxi_svc_desc descs[];
};

/* The layouts the reference pins down. */
_Static_assert(sizeof (struct cxi_svc_desc) == 68, "cxi_svc_desc is 68 bytes");
_Static_assert(offsetof (struct cxi_svc_desc, num_vld_vnis) == 1, "num_vld_vnis at 1");
_Static_assert(offsetof (struct cxi_svc_desc, vnis) == 2, "vnis at 2");
_Static_assert(offsetof (struct cxi_svc_desc, tcs) == 10, "tcs at 10");
_Static_assert(offsetof (struct cxi_svc_desc, members) == 16, "members at 16");
_Static_assert(offsetof (struct cxi_svc_desc, limits) == 32, "limits at 32");
_Static_assert(offsetof (struct cxi_svc_desc, svc_id) == 64, "svc_id at 64");
_Static_assert(sizeof (struct cxi_rsrc_limits) == 32, "cxi_rsrc_limits is 32 bytes");
_Static_assert(sizeof (struct cxi_svc_fail_info) == 20,
               "cxi_svc_fail_info is 20 bytes");
_Static_assert(offsetof (struct cxi_svc_fail_info, no_le_pools) == 16,
               "pool flags at 16");
_Static_assert(sizeof (struct cxil_devinfo) == 152, "cxil_devinfo is 152 bytes");
_Static_assert(offsetof (struct cxil_devinfo, device_name) == 28, "device_name at 28");
_Static_assert(offsetof (struct cxil_devinfo, vendor_id) == 52, "vendor_id at 52");
_Static_assert(offsetof (struct cxil_devinfo, num_ptes) == 72, "num_ptes at 72");
_Static_assert(offsetof (struct cxil_devinfo, pci_domain) == 88, "pci_domain at 88");
_Static_assert(offsetof (struct cxil_devinfo, link_mtu) == 96, "link_mtu at 96");
_Static_assert(offsetof (struct cxil_devinfo, fru_description) == 128, "fru at 128");
_Static_assert(offsetof (struct cxil_devinfo, is_vf) == 144, "is_vf at 144");
_Static_assert(offsetof (struct cxil_device_list, info) == 8, "device list array at 8");
_Static_assert(offsetof (struct cxil_svc_list, descs) == 4, "service list array at 4");

/* The functions the agent uses, as types: the agent keeps dlsym()ed
 * pointers of these types, and the double declares itself with them. */
typedef int cxil_get_device_list_fn (struct cxil_device_list **out);
typedef void cxil_free_device_list_fn (struct cxil_device_list *list);
typedef int cxil_open_device_fn (uint32_t dev_id, struct cxil_dev **out);
typedef void cxil_close_device_fn (struct cxil_dev *dev);
typedef int cxil_alloc_svc_fn (struct cxil_dev *dev,
                               const struct cxi_svc_desc *desc,
                               struct cxi_svc_fail_info *fail_info);
typedef int cxil_destroy_svc_fn (struct cxil_dev *dev, unsigned int svc_id);
typedef int cxil_get_svc_list_fn (struct cxil_dev *dev, struct cxil_svc_list **out);
typedef void cxil_free_svc_list_fn (struct cxil_svc_list *list);
typedef int cxil_get_svc_fn (struct cxil_dev *dev,
                             unsigned int svc_id,
                             struct cxi_svc_desc *out);
typedef int cxil_update_svc_fn (struct cxil_dev *dev,
                                const struct cxi_svc_desc *desc,
                                struct cxi_svc_fail_info *fail_info);
typedef int cxil_svc_enable_fn (struct cxil_dev *dev,
                                unsigned int svc_id,
                                bool enable); /* 1.9 */

/* The bitfield byte, as the reference gives it (GCC, LSB first). */
#define CXI_DESC_FLAG_RESTRICTED_MEMBERS 0x01
#define CXI_DESC_FLAG_RESTRICTED_VNIS    0x02
#define CXI_DESC_FLAG_RESTRICTED_TCS     0x04
#define CXI_DESC_FLAG_RESOURCE_LIMITS    0x08
#define CXI_DESC_FLAG_ENABLE             0x10
#define CXI_DESC_FLAG_SYSTEM             0x20

#endif
