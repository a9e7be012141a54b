/* noudev: the five libudev functions that the static libhwloc.a references, for `make static`.
 * hwloc asks udev only for block devices' vendor, model and serial (OS devices of disks, which ddplaunch never
 * looks at), and every use is guarded by "if (udev)". udev_new() here returns NULL, so hwloc reads the same
 * facts from /run/udev/data where they exist, and the executable needs no libudev.so.1: glibc only, which a
 * manylinux wheel may rely on and a minimal container image has (libudev1 often is not installed there). */
#include <stddef.h>

struct udev;
struct udev_device;

struct udev *udev_new(void);
struct udev *udev_unref(struct udev *udev);
struct udev_device *udev_device_new_from_subsystem_sysname(struct udev *udev, const char *subsystem,
                                                           const char *sysname);
const char *udev_device_get_property_value(struct udev_device *dev, const char *key);
struct udev_device *udev_device_unref(struct udev_device *dev);

struct udev *udev_new(void)
{
    return NULL;
}

struct udev *udev_unref(struct udev *udev)
{
    (void)udev;
    return NULL;
}

struct udev_device *udev_device_new_from_subsystem_sysname(struct udev *udev, const char *subsystem,
                                                           const char *sysname)
{
    (void)udev, (void)subsystem, (void)sysname;
    return NULL;
}

const char *udev_device_get_property_value(struct udev_device *dev, const char *key)
{
    (void)dev, (void)key;
    return NULL;
}

struct udev_device *udev_device_unref(struct udev_device *dev)
{
    (void)dev;
    return NULL;
}
